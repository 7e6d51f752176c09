"""The wire contract as code: the request models the gateway validates with, the
declared responses and notifications, and the JSON Schema made from them."""
