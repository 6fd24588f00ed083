"""Who may start calls, mint tokens and read data: credentials, origins, rate limits, body caps."""
