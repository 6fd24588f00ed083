"""What the bot can do for a caller: look up an order, the business's own tools and their forms (a booking), hand over to a person, hang up."""
