// OpenAI-shaped HTTP errors; see api_error.h.
#include "server/api_error.h"

#include <nlohmann/json.hpp>

namespace kite::server {

std::string ApiError::to_json() const {
  nlohmann::ordered_json e = {
      {"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
  if (param) e["param"] = *param;
  if (code) e["code"] = *code;
  nlohmann::ordered_json j = {{"error", std::move(e)}};
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

HttpResponse ApiError::to_response() const {
  HttpResponse r;
  r.status = status;
  r.body = to_json();
  return r;
}

ApiError bad_request(std::string message, std::optional<std::string> param) {
  return ApiError{400, std::move(message), "invalid_request_error", std::move(param), std::nullopt};
}

ApiError model_not_found(const std::string& model) {
  return ApiError{404, "The model '" + model + "' does not exist (see GET /v1/models)",
                  "invalid_request_error", "model", "model_not_found"};
}

ApiError unauthorized() {
  return ApiError{401, "Missing or invalid API key: send 'Authorization: Bearer <key>'",
                  "authentication_error", std::nullopt, "invalid_api_key"};
}

ApiError too_many_requests(std::string message) {
  return ApiError{429, std::move(message), "rate_limit_error", std::nullopt, "rate_limit_exceeded"};
}

ApiError service_unavailable(std::string message) {
  return ApiError{503, std::move(message), "service_unavailable", std::nullopt,
                  "service_unavailable"};
}

ApiError payload_too_large(size_t limit_bytes) {
  return ApiError{413,
                  "The request body is larger than the server's limit of " +
                      std::to_string(limit_bytes) + " bytes (--max-request-body-bytes)",
                  "invalid_request_error", std::nullopt, "request_too_large"};
}

ApiError headers_too_large(size_t limit_bytes) {
  return ApiError{431,
                  "The request line and headers are larger than the server's limit of " +
                      std::to_string(limit_bytes) + " bytes (--max-header-bytes)",
                  "invalid_request_error", std::nullopt, "request_header_fields_too_large"};
}

ApiError route_not_found(const std::string& method, const std::string& path) {
  return ApiError{404, "No route for " + method + " " + path, "not_found_error", std::nullopt,
                  "not_found"};
}

ApiError method_not_allowed(const std::string& method, const std::string& path,
                            const std::string& allow) {
  return ApiError{405,
                  "Method " + method + " is not allowed on " + path + " (allowed: " + allow + ")",
                  "invalid_request_error", std::nullopt, "method_not_allowed"};
}

ApiError internal(std::string message) {
  return ApiError{500, std::move(message), "server_error", std::nullopt, "internal_error"};
}

ApiError from_status(const Status& status, std::optional<std::string> param) {
  switch (status.code()) {
    case ErrorCode::kInvalidArgument:
      return bad_request(status.message(), std::move(param));
    case ErrorCode::kResourceExhausted:
      return too_many_requests(status.message());
    default:
      return internal(status.message());
  }
}

}  // namespace kite::server
