-- GETs one path (an object, or a list) with a bearer token. wrk itself counts answers other than
-- 2xx/3xx ("Non-2xx or 3xx responses"); no response() here, so list bodies are not copied to Lua.
-- Arguments (after `--`): bearer token.
function init(args)
   wrk.headers["Authorization"] = "Bearer " .. args[1]
   wrk.headers["Accept"] = "application/json"
end
