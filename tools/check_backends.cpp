#include "check_backends.h"

namespace nktool {
namespace {

BackendChoice cuda_choice() {
  BackendChoice b{NK_BACKEND_CUDA, "cuda", false, ""};
  if (!nk_has_cuda_build()) b.why_not = "this normkit was built without CUDA";
  else if (nk_cuda_device_count() == 0) b.why_not = "no CUDA device is available";
  else b.available = true;
  return b;
}

}  // namespace

std::vector<BackendChoice> choose_backends(const std::string& which) {
  std::vector<BackendChoice> list;
  if (which == "cpu" || which == "all") list.push_back({NK_BACKEND_CPU, "cpu", true, ""});
  if (which == "cuda" || which == "all") list.push_back(cuda_choice());
  return list;
}

std::string describe_backends(const std::vector<BackendChoice>& backends) {
  std::string list;
  for (const BackendChoice& b : backends) {
    list += std::string(list.empty() ? "" : ", ") + b.name +
            (b.available ? "" : " (unavailable: " + b.why_not + ")");
  }
  return list;
}

std::string unavailable_reasons(const std::vector<BackendChoice>& backends) {
  std::string reasons;
  for (const BackendChoice& b : backends) {
    if (b.available) continue;
    reasons += std::string(reasons.empty() ? "" : "; ") + b.name + ": " + b.why_not;
  }
  return reasons;
}

}  // namespace nktool
