// The API's bearer token: made at the server's first start, kept in DATA/token (mode 0600).
#pragma once

#include <string>

namespace zenith::platform {

// Reads DIR/token, creating it with a fresh random token when missing.
std::string load_or_create_token(const std::string& data_dir);

// Reads DIR/token; empty when there is none.
std::string read_token(const std::string& data_dir);

// Constant-time comparison, so a wrong token's timing says nothing about the right one.
bool token_equals(const std::string& a, const std::string& b);

}  // namespace zenith::platform
