// Fixture for tests/layering: hcq must never name a vendor driver.
#include "drivers/am/am_device.hpp"
