-- wrk script for scripts/bench-rss: POST the file named by $BODY_FILE as JSON.
local f = assert(io.open(os.getenv("BODY_FILE"), "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"
