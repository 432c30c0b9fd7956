// Fixture for tests/layering: the registry header tools include names no model (only its .cpp files compose).
#include "drivers/sim/edu.hpp"
