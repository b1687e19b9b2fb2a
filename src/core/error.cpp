// Anchors the core layer's library (header-only types live in include/memra/error.h).
#include "memra/error.h"
