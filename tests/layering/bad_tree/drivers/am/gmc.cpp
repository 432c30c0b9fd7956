// Fixture for tests/layering: a driver never includes the compiler.
#include "compiler/ir.hpp"
#include "drivers/pci/pci_device.hpp"
