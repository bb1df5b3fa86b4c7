"""The OpenAI Responses API, stateless: a request's input items in, a Response or its typed events out."""
