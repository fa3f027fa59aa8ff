-- POSTs Events with unique names: <prefix>-<thread id>-<per-thread counter>.
-- Arguments (after `--`): path, bearer token, name prefix, file holding the body template
-- (the name in it is __NAME__).
local threads = {}
local counter = 1

function setup(thread)
   thread:set("id", #threads + 1)
   table.insert(threads, thread)
end

function init(args)
   wrk.method = "POST"
   wrk.path = args[1]
   wrk.headers["Authorization"] = "Bearer " .. args[2]
   wrk.headers["Content-Type"] = "application/json"
   prefix = args[3]
   local file = assert(io.open(args[4], "r"))
   template = file:read("*a")
   file:close()
   failures = 0
end

function request()
   local name = prefix .. "-" .. id .. "-" .. counter
   counter = counter + 1
   local body = string.gsub(template, "__NAME__", name)
   return wrk.format(nil, nil, nil, body)
end

function response(status, headers, body)
   if status ~= 201 then
      failures = failures + 1
      if failures <= 3 then
         io.stderr:write("create answered " .. status .. ": " .. string.sub(body, 1, 300) .. "\n")
      end
   end
end
