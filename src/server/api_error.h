// ApiError: an HTTP error in OpenAI's JSON shape,
//   {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}
// with the status it goes out with. `param` names the request field at fault (null when the
// error is not about one field), so clients can show the user what to fix.
#pragma once

#include <optional>
#include <string>

#include "core/status.h"
#include "server/http_types.h"

namespace kite::server {

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::optional<std::string> param;
  std::optional<std::string> code;

  std::string to_json() const;
  HttpResponse to_response() const;
};

ApiError bad_request(std::string message, std::optional<std::string> param = std::nullopt);
ApiError model_not_found(const std::string& model);
ApiError unauthorized();
ApiError too_many_requests(std::string message);
ApiError service_unavailable(std::string message);
ApiError payload_too_large(size_t limit_bytes);
ApiError headers_too_large(size_t limit_bytes);  // 431
ApiError route_not_found(const std::string& method, const std::string& path);
ApiError method_not_allowed(const std::string& method, const std::string& path,
                            const std::string& allow);
ApiError internal(std::string message);

// Maps an engine Status to its HTTP error: kInvalidArgument -> 400, kResourceExhausted -> 429,
// anything else -> 500. `param` is used for 400s.
ApiError from_status(const Status& status, std::optional<std::string> param = std::nullopt);

}  // namespace kite::server
