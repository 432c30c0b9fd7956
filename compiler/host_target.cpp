#include "compiler/llvm_headers.hpp"
#include "compiler/target.hpp"

#include <algorithm>
#include <vector>

namespace baregpu::compiler {

Target Target::host() {
    Target t;
    t.triple = "x86_64-unknown-linux-gnu";
    t.cpu = llvm::sys::getHostCPUName().str();
    // Sorted, so that the same machine always yields the same cache key.
    std::vector<std::string> features;
    for (const auto& f : llvm::sys::getHostCPUFeatures()) features.push_back((f.second ? "+" : "-") + f.first().str());
    std::sort(features.begin(), features.end());
    for (const std::string& f : features) t.features += (t.features.empty() ? "" : ",") + f;
    return t;
}

}  // namespace baregpu::compiler
