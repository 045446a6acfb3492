"""The command surface: the command table (name, arity, flags, key positions), one
module per command family, per-connection sessions and Redis-exact error texts.
Handlers read and write only through `store`; they never touch sockets or S3."""
