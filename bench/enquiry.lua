-- The enquiry every intake request sends, from bench/enquiry.json (the tests' full purchase
-- enquiry: every field, one address) with EMAIL replaced.
local f = assert(io.open(os.getenv("BENCH_DIR") .. "/enquiry.json", "r"))
local template = f:read("*a"):gsub("%s+$", "")
f:close()
local before, after = template:match("^(.-)EMAIL(.*)$")

function enquiry_body(email)
   return before .. email .. after
end
