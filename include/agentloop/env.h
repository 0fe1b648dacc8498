// Environment variables as a value. Library code reads only the variables
// its caller passes in an EnvMap, never the process environment: tests build
// maps, the command-line front end copies its environment once.
#pragma once

#include <map>
#include <string>

namespace agentloop {

using EnvMap = std::map<std::string, std::string>;

// The value of `name` in `env`; "" when it is not set (an unset and an empty
// variable mean the same to every reader).
std::string EnvValue(const EnvMap& env, const std::string& name);

}  // namespace agentloop
