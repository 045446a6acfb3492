"""Every error text we reply with, as Redis 7 words it (without the leading '-')."""

from __future__ import annotations


class CommandError(Exception):
    """Raised by a handler: the reply is this error; the connection carries on."""

    def __init__(self, text: str | bytes) -> None:
        self.text = text.encode() if isinstance(text, str) else text
        super().__init__(self.text)


WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"
SYNTAX = "ERR syntax error"
NOT_INTEGER = "ERR value is not an integer or out of range"
NOT_FLOAT = "ERR value is not a valid float"
OVERFLOW = "ERR increment or decrement would overflow"
INCR_NAN_OR_INF = "ERR increment would produce NaN or Infinity"
NO_SUCH_KEY = "ERR no such key"
INDEX_OUT_OF_RANGE = "ERR index out of range"
DB_INDEX_OUT_OF_RANGE = "ERR DB index is out of range"
INVALID_DB_INDEX = "ERR invalid DB index"
SAME_OBJECT = "ERR source and destination objects are the same"
INVALID_EXPIRE = "ERR invalid expire time in '{}' command"
NOT_POSITIVE = "ERR value is out of range, must be positive"
STRING_TOO_LONG = "ERR string exceeds maximum allowed size (proto-max-bulk-len)"
OFFSET_OUT_OF_RANGE = "ERR offset is out of range"
TIMEOUT_NOT_FLOAT = "ERR timeout is not a float or out of range"
TIMEOUT_NOT_INTEGER = "ERR timeout is not an integer or out of range"
TIMEOUT_NEGATIVE = "ERR timeout is negative"
MIN_MAX_NOT_FLOAT = "ERR min or max is not a float"
MIN_MAX_NOT_STRING = "ERR min or max not valid string range item"
HASH_VALUE_NOT_INTEGER = "ERR hash value is not an integer"
HASH_VALUE_NOT_FLOAT = "ERR hash value is not a float"
NOT_VALID_FLOAT_SCORE = "ERR value is not a valid float"
SCORE_NAN = "ERR resulting score is not a number (NaN)"
WEIGHT_NOT_FLOAT = "ERR weight value is not a float"
INVALID_CURSOR = "ERR invalid cursor"
NOAUTH = "NOAUTH Authentication required."
WRONGPASS = "WRONGPASS invalid username-password pair or user is disabled."
AUTH_NOT_SET = (
    "ERR AUTH <password> called without any password configured for the default user. "
    "Are you sure your configuration is correct?"
)
UNKNOWN_COMMAND = "ERR unknown command '{}', with args beginning with: {}"
UNKNOWN_SUBCOMMAND = "ERR unknown subcommand '{}'. Try {} HELP."
WRONG_ARITY = "ERR wrong number of arguments for '{}' command"
MULTI_NESTED = "ERR MULTI calls can not be nested"
EXEC_WITHOUT_MULTI = "ERR EXEC without MULTI"
DISCARD_WITHOUT_MULTI = "ERR DISCARD without MULTI"
WATCH_IN_MULTI = "ERR WATCH inside MULTI is not allowed"
NOT_IN_MULTI = "ERR Command not allowed inside a transaction"
EXECABORT = "EXECABORT Transaction discarded because of previous errors."
SUBSCRIBE_CONTEXT = (
    "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET "
    "are allowed in this context"
)
PROTOCOL_INVALID_MULTIBULK = "ERR Protocol error: invalid multibulk length"
PROTOCOL_INVALID_BULK = "ERR Protocol error: invalid bulk length"
PROTOCOL_EXPECTED_DOLLAR = "ERR Protocol error: expected '$', got '{}'"
PROTOCOL_UNBALANCED_QUOTES = "ERR Protocol error: unbalanced quotes in request"
PROTOCOL_BIG_INLINE = "ERR Protocol error: too big inline request"
PROTOCOL_BIG_MBULK_COUNT = "ERR Protocol error: too big mbulk count string"
PROTOCOL_BIG_BULK_COUNT = "ERR Protocol error: too big bulk count string"
PROTOCOL_UNAUTH_MBULK = "ERR Protocol error: unauthenticated multibulk length"
PROTOCOL_UNAUTH_BULK = "ERR Protocol error: unauthenticated bulk length"
NOPROTO = "NOPROTO unsupported protocol version"
LOADING = "LOADING Redis is loading the dataset in memory"
READONLY = "READONLY You can't write against a read only replica."
NOREPLICAS = "NOREPLICAS Not enough good replicas to write."
READONLY_VIEW = "READONLY You can't write against a historical view"
MAX_CLIENTS = "ERR max number of clients reached"
NO_SUCH_CLIENT = "ERR No such client"
CLIENT_NAME_SPACES = "ERR Client names cannot contain spaces, newlines or special characters."
UNSUPPORTED_CONFIG = "ERR Unknown option or number of arguments for CONFIG SET - '{}'"
BUSYGROUP = "BUSYGROUP Consumer Group name already exists"
XADD_ID_SMALL = "ERR The ID specified in XADD is equal or smaller than the target stream top item"
XADD_ID_ZERO = "ERR The ID specified in XADD must be greater than 0-0"
STREAM_ID_INVALID = "ERR Invalid stream ID specified as stream command argument"
NUMKEYS_POSITIVE = "ERR numkeys should be greater than 0"
COUNT_POSITIVE = "ERR count should be greater than 0"
FENCED = (
    "READONLY this server was fenced: another server took over its storage prefix, "
    "so it accepts no more writes"
)
TRYAGAIN_STORAGE = "TRYAGAIN object storage unavailable: {}"
# A write to a RAFT table whose record etcd did not commit (no quorum, or this node
# lost the lead): it is applied on this node, so its outcome is unknown.
TRYAGAIN_RAFT = "TRYAGAIN raft write not committed in etcd (no quorum?): its outcome is unknown"
# A group's primary that cannot reach etcd to renew its lease refuses writes with this
# until it can confirm its lead (or steps down).
TRYAGAIN_NO_QUORUM = "TRYAGAIN this primary cannot reach an etcd quorum: writes wait for it"
NOPERM_COMMAND = "NOPERM this user has no permissions to run the '{}' command"
NOPERM_KEY = "NOPERM this user has no permissions to access one of the keys used as arguments"
NOPERM_CHANNEL = (
    "NOPERM this user has no permissions to access one of the channels used as arguments"
)
NOPERM_EXEC = (
    "NOPERM ACLs rules changed between the moment the transaction was accumulated and the "
    "EXEC call. This command is no longer allowed for the following reason: {}"
)
ACL_USERNAME_SPACES = "ERR Usernames can't contain spaces or null characters"
ACL_DEFAULT_UNDELETABLE = "ERR The 'default' user cannot be removed"
ACL_UNKNOWN_CATEGORY = "ERR Unknown category '%s'"
ACL_GENPASS_RANGE = (
    "ERR ACL GENPASS argument must be the number of bits for the output password, "
    "a positive number up to 4096"
)
ACL_NO_ACLFILE = (
    "ERR This Redis instance is not configured to use an ACL file. You may want to specify "
    "users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a "
    "Redis configuration file set) in order to store users in the Redis configuration."
)
ACL_SAVE_FAILED = (
    "ERR There was an error trying to save the ACLs. Please check the server logs for more "
    "information"
)

# DUMP / RESTORE (cluster.c)
BUSYKEY = "BUSYKEY Target key name already exists."
BAD_PAYLOAD = "ERR DUMP payload version or checksum are wrong"
BAD_DATA_FORMAT = "ERR Bad data format"
INVALID_TTL = "ERR Invalid TTL value, must be >= 0"
INVALID_IDLETIME = "ERR Invalid IDLETIME value, must be >= 0"
INVALID_FREQ = "ERR Invalid FREQ value, must be >= 0 and <= 255"

# CLIENT TRACKING / CLIENT CACHING (commands.tracking)
ONE_REDIRECT = "ERR A client can only redirect to a single other client"
NO_REDIRECT_CLIENT = "ERR The client ID you want redirect to does not exist"
PREFIX_NEEDS_BCAST = "ERR PREFIX option requires BCAST mode to be enabled"
BCAST_SWITCH = (
    "ERR You can't switch BCAST mode on/off before disabling tracking for this client, "
    "and then re-enabling it with a different mode."
)
BCAST_OPTS = "ERR OPTIN and OPTOUT are not compatible with BCAST"
OPTIN_OPTOUT = "ERR You can't specify both OPTIN mode and OPTOUT mode"
OPT_SWITCH = (
    "ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, "
    "and then re-enabling it with a different mode."
)
OVERLAP_EXISTING = (
    b"ERR Prefix '%b' overlaps with an existing prefix '%b'. "
    b"Prefixes for a single client must not overlap."
)
OVERLAP_OTHER = (
    b"ERR Prefix '%b' overlaps with another provided prefix '%b'. "
    b"Prefixes for a single client must not overlap."
)
CACHING_NOT_TRACKING = (
    "ERR CLIENT CACHING can be called only when the client is in tracking mode with "
    "OPTIN or OPTOUT mode enabled"
)
CACHING_YES_OPTIN = "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode."
CACHING_NO_OPTOUT = "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode."

# A container command's unknown subcommand (PUBSUB, ACL, SCRIPT, SLOWLOG, XINFO, ...).
SUBCOMMAND_SYNTAX = b"ERR unknown subcommand or wrong number of arguments for '%b'. Try %b HELP."
