-- For wrk -s (bench/measure.py run_wrk with a pace): each connection waits the pace, in ms,
-- before each request, so a smoke run sends a few requests instead of saturating the server.
local pace = 0

function init(args)
    pace = tonumber(args[1])
end

function delay()
    return pace
end
