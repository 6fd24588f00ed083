"""What the bot can do for a caller: look up an order, book a rental, hand over to a person, hang up."""
