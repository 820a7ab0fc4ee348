// The `zenith serve` command line of a deployed service: the fixed part from its record and
// model version (package, name, version, port, data dir, replicas, --managed), then the options
// its deploy request gave (DeployRequest::options, stored as DeploymentRecord::options), each as
// its flag. The keys are `zenith serve`'s flag names without the dashes.
#pragma once

#include <string>
#include <vector>

#include "platform/deployments/deployment_store.h"

namespace zenith::platform {

// argv for the service's `zenith serve` (argv[0] is `binary`); it writes its port to `port_file`.
std::vector<std::string> serve_command(const std::string& binary, const std::string& data_dir,
                                       const DeploymentRecord& record, const ModelVersion& model,
                                       const std::string& port_file);

// Whether the service serves plain HTTP (the "insecure-http" option) rather than HTTPS.
bool serves_insecure_http(const DeploymentRecord& record);

}  // namespace zenith::platform
