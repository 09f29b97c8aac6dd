// `normkit info`: library version, build features, devices, and the backend `bench` would use.
#pragma once

namespace nktool {

int run_info();

}  // namespace nktool
