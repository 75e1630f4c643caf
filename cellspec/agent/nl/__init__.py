"""Controlled English for `cellspec design`: lexicon (lexicon.toml, one file), lexer,
lark grammar (grammar.lark), parser into structure frames, composer into the design DSL.
Used by the offline translator and, for its vocabulary, by the openai adapter's prompt."""
