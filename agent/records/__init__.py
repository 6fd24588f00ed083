"""Call records: every call and each of its turns kept in a database, and the API that reads them."""
