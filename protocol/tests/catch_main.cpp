// The one translation unit that holds Catch2's main(): compiled once into a
// static library and linked into every protocol test executable.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
