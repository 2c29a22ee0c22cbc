// What a ZeroMQ endpoint must look like, checked before ZeroMQ sees it.
// ZeroMQ's own answers to a wrong endpoint are errno strings ("Invalid
// argument" for "127.0.0.1:5557", "Protocol not supported" for "http://...")
// that do not say what was expected; these messages do.
#pragma once

#include <string>
#include <string_view>

namespace sci {

enum class EndpointUse {
  kConnect,  // tcp://host:port (port 1..65535) or ipc://path
  kBind,     // also tcp://*:port and tcp://host:* (any interface / any port)
};

// An empty string when `endpoint` has the shape `use` accepts; otherwise a
// message naming `name` (the option or flag: "endpoint", "--endpoint"),
// quoting the value and saying what an endpoint must look like. Whether the
// host resolves or the path exists is left to ZeroMQ.
std::string CheckEndpointSyntax(std::string_view name, std::string_view endpoint, EndpointUse use);

}  // namespace sci
