// Fixture for tests/layering: a benchmark gets its device from the registry, never a model.
#include "drivers/registry_am.hpp"
#include "drivers/sim/amdgpu/navi.hpp"
