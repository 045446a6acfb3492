-- The sandbox scripts and functions run in (loaded once per Lua state by
-- commands.lua_engine, chunk name "@__redis__": the error handler skips its frames).
-- `py` holds the Python callbacks; the chunk returns the engine's Lua half.
local py = ...
local G = _G
local type, rawget, rawset, error, select, tostring, pcall, xpcall, setfenv, loadstring,
      setmetatable, getmetatable, next, unpack =
  type, rawget, rawset, error, select, tostring, pcall, xpcall, setfenv, loadstring,
  setmetatable, getmetatable, next, unpack
local format = string.format
local getinfo, sethook = debug.getinfo, debug.sethook

local READONLY = 'Attempt to modify a readonly table'
local protected = setmetatable({}, {__mode = 'k'})

-- A read-only view of `t`: reads go through, writes raise Redis' error.
local function deny() error(READONLY, 2) end

-- What getmetatable shows of a protected table: a read-only copy of its metatable.
local function meta_view(mt)
  local view = {}
  for k, v in pairs(mt) do view[k] = v end
  local p = setmetatable({}, {__index = view, __newindex = deny, __metatable = false})
  protected[p] = view
  return p
end

local function protect_meta(mt)
  mt.__metatable = meta_view(mt)
  return mt
end

local function readonly(t)
  local p = setmetatable({}, protect_meta({__index = t, __newindex = deny}))
  protected[p] = t
  return p
end

local function safe_setmetatable(t, mt)
  if protected[t] then error(READONLY, 0) end
  return setmetatable(t, mt)
end

local function safe_rawset(t, k, v)
  if protected[t] then error(READONLY, 0) end
  return rawset(t, k, v)
end

-- A Python callback raises an error as an exception lupa hands to Lua as userdata;
-- `py.unwrap` gives back what it carries (an error table or a message).
local function unwrap(err)
  if type(err) == 'userdata' then
    local v = py.unwrap(err)
    if v ~= nil then return v end
  end
  return err
end

-- luaL_where(L, 1) as seen from a library function implemented in Python: the
-- position of the code that called it (level 3: where, the call into Python, it).
local function where()
  local i = getinfo(3, 'Sl')
  if i and i.currentline > 0 then return i.short_src .. ':' .. i.currentline .. ': ' end
  return ''
end

local stop_killing_fwd
local function error_handler(err)
  if stop_killing_fwd then stop_killing_fwd() end
  local lvl = 2
  local i = getinfo(lvl, 'nSl')
  if i and i.what == 'C' then lvl = lvl + 1; i = getinfo(lvl, 'nSl') end
  while i and i.source == '@__redis__' do
    lvl = lvl + 1; i = getinfo(lvl, 'nSl')
  end
  err = unwrap(err)
  if type(err) ~= 'table' then err = {err = 'ERR ' .. tostring(err)} end
  if i then
    err['source'] = i.source
    err['line'] = i.currentline
  end
  return err
end

-- Redis' pcall: an error table with an `err` string comes back as that string.
local function pack(...) return select('#', ...), {...} end
local function redis_pcall(f, ...)
  local n, res = pack(pcall(f, ...))
  if not res[1] then
    local e = unwrap(res[2])
    if type(e) == 'table' then
      local msg = e.err
      if type(msg) == 'string' then e = msg end
    end
    res[2] = e
  end
  return unpack(res, 1, n)
end

local function err_table(msg) return {err = msg} end

-- lupa hands a Python function at most about 8,000 arguments (it needs Lua stack
-- slots of its own); Redis' Lua takes as many as `unpack` gives (LUAI_MAXCSTACK). A
-- call with many arguments passes them to Python as one table instead (`py.spread`
-- calls `f` with them). Not a tail call: the error handler finds the script's line
-- a frame further down, past this chunk's frames.
local WIDE = 256
local function wide(f)
  local spread = py.spread
  return function(...)
    local n = select('#', ...)
    local r
    if n <= WIDE then r = f(...) else r = spread(f, n, {...}) end
    return r
  end
end

local function redis_api(functions)
  local api = {
    call = wide(py.call),
    pcall = wide(py.pcall),
    error_reply = py.error_reply,
    status_reply = py.status_reply,
    sha1hex = py.sha1hex,
    log = py.log,
    LOG_DEBUG = 0, LOG_VERBOSE = 1, LOG_NOTICE = 2, LOG_WARNING = 3,
    setresp = py.setresp,
    set_repl = py.set_repl,
    REPL_NONE = 0, REPL_AOF = 1, REPL_SLAVE = 2, REPL_REPLICA = 2, REPL_ALL = 3,
    acl_check_cmd = py.acl_check_cmd,
    REDIS_VERSION = py.version, REDIS_VERSION_NUM = py.version_num,
  }
  return readonly(api)
end

local function random(...)
  local r = py.random()
  local n = select('#', ...)
  if n == 0 then return r end
  local l, u = 1, math.floor(tonumber((...)) or error("bad argument #1 to 'random' (number expected)"))
  if n == 2 then
    l = u
    u = math.floor(tonumber((select(2, ...))) or error("bad argument #2 to 'random' (number expected)"))
  elseif n > 2 then
    error('wrong number of arguments')
  end
  if l > u then error("bad argument #" .. n .. " to 'random' (interval is empty)") end
  return math.floor(r * (u - l + 1)) + l
end

local function copy(t)
  local c = {}
  for k, v in pairs(t) do c[k] = v end
  return c
end

local mathlib = copy(math)
mathlib.random = random
mathlib.randomseed = function(seed) py.randomseed(tonumber(seed) or 0) end

-- Compiled code's `return redis.call(...)` tail calls made ordinary calls (`wide`
-- is a Lua function: a tail call to it would drop the frame whose line an error names;
-- commands.lua_bytecode).
local dump = string.dump
local function untail(f)
  local patched = py.untail(dump(f))
  local g = patched and loadstring(patched)
  return g or f
end

-- Code loaded by a script runs in the script's globals; binary chunks are refused
-- (as Redis 7.0 does: loadstring gives nil).
local env_of_state
local function safe_loadstring(code, chunkname)
  if type(code) == 'string' and code:byte(1) == 27 then return nil, 'binary chunks are not allowed' end
  local f, err = loadstring(code, chunkname)
  if f then
    f = untail(f)
    setfenv(f, env_of_state)
  end
  return f, err
end

local function safe_load(fn, chunkname)
  local parts = {}
  while true do
    local piece = fn()
    if piece == nil or piece == '' then break end
    parts[#parts + 1] = piece
  end
  return safe_loadstring(table.concat(parts), chunkname)
end

local BASE = {
  'assert', 'collectgarbage', 'error', 'gcinfo', 'getmetatable', 'ipairs', 'load',
  'loadstring', 'next', 'pairs', 'rawequal', 'rawget', 'select', 'setmetatable',
  'tonumber', 'tostring', 'type', 'unpack', 'xpcall', '_VERSION',
}

-- A fresh global environment: `backing` holds the names, `env` is what code sees
-- (reading a missing name and writing any name raise Redis' errors).
-- A table whose missing fields raise the missing-global error (Redis' error metatable).
local function strict(t)
  return setmetatable(t, {
    __index = function(_, k)
      error(format("Script attempted to access nonexistent global variable '%s'", tostring(k)), 2)
    end,
  })
end

local function load_api()
  return readonly(strict({
    register_function = py.register_function,
    log = py.log,
    LOG_DEBUG = 0, LOG_VERBOSE = 1, LOG_NOTICE = 2, LOG_WARNING = 3,
    REDIS_VERSION = py.version, REDIS_VERSION_NUM = py.version_num,
  }))
end

local function new_env(libs, redis_table)
  local backing = {}
  for _, name in ipairs(BASE) do backing[name] = G[name] end
  backing.pcall = redis_pcall
  backing.rawset = safe_rawset
  backing.setmetatable = safe_setmetatable
  backing.loadstring = safe_loadstring
  backing.load = safe_load

  backing.coroutine = readonly(copy(coroutine))
  backing.string = readonly(string)
  backing.table = readonly(copy(table))
  backing.math = readonly(mathlib)
  for name, lib in pairs(libs) do backing[name] = readonly(lib) end
  backing.redis = redis_table
  -- While FUNCTION LOAD runs a library, its code sees only `redis` with the load API.
  local loading = {redis = load_api()}
  local current = backing
  local env = setmetatable({}, protect_meta({
    __index = function(_, k)
      local v = current[k]
      if v == nil then
        error(format("Script attempted to access nonexistent global variable '%s'", tostring(k)), 2)
      end
      return v
    end,
    __newindex = deny,
  }))
  backing._G = env
  protected[env] = backing
  local function set_loading(on)
    if on then current = loading else current = backing end
  end
  return env, backing, set_loading
end

-- `env` is what code loaded by scripts runs in. The interpreter's own globals stay
-- out of reach (no getfenv, no debug library, no binary chunks); what scripts must
-- never reach is dropped from them all the same (lupa itself needs `debug`).
local function activate(env)
  env_of_state = env
  for _, name in ipairs({'os', 'io', 'package', 'require', 'module', 'dofile', 'loadfile',
                         'print', 'python'}) do
    G[name] = nil
  end
  local smeta = getmetatable('')
  if smeta then protect_meta(smeta) end
end

local function compile(code, chunkname, env)
  local f, err = loadstring(code, chunkname)
  if not f then return nil, err end
  f = untail(f)
  setfenv(f, env)
  return f
end

local HOOK_EVERY = 100000
-- `py.tick` answers the error that ends the run (killed, or a FUNCTION LOAD past its
-- time), or nil. Once ending, the hook runs on every line so that a pcall in the
-- script cannot catch the error and go on; the error handler (reached when the error
-- leaves the script) turns it off.
local killing = false
local function killed_hook()
  local i = getinfo(2, 'S')
  if killing and i and i.source ~= '@__redis__' then error(err_table(killing), 0) end
end
local function hook()
  local msg = py.tick()
  if msg then
    killing = msg
    sethook(killed_hook, 'l')
    error(err_table(msg), 0)
  end
end

local function stop_killing()
  if killing then
    killing = false
    sethook()
  end
end
stop_killing_fwd = stop_killing

-- Run `f` (an EVAL chunk when `keys` is nil: KEYS and ARGV are already set, or a
-- function taking keys and args): returns ok and the value or the error table.
-- As Redis, a garbage collection step every 50 runs keeps the heap from growing
-- without a full cycle's latency.
local GC_PERIOD = 50
local runs = 0
local collect = collectgarbage

local function run(f, keys, args)
  runs = runs + 1
  if runs == GC_PERIOD then
    runs = 0
    collect('step', GC_PERIOD)
  end
  sethook(hook, '', HOOK_EVERY)
  local ok, res
  if keys == nil then
    ok, res = xpcall(f, error_handler)
  else
    ok, res = xpcall(function() return f(keys, args) end, error_handler)
  end
  sethook()
  return ok, res
end

local function run_load(f, set_loading)
  sethook(hook, '', HOOK_EVERY)
  set_loading(true)
  local ok, res = xpcall(f, error_handler)
  set_loading(false)
  sethook()
  return ok, res
end

return {
  where = where,
  activate = activate,
  new_env = new_env,
  redis_api = redis_api,
  compile = compile,
  run = run,
  run_load = run_load,
  rawget = rawget,
  rawset = rawset,
  next = next,
  type = type,
  table = function() return {} end,
}
