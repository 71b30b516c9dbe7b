// Catch2's main(), compiled once into a static library and linked into every
// test executable (it is the slow part to compile in Catch2 2.x). Written
// out rather than taken from CATCH_CONFIG_MAIN (2.x) or Catch2Main (3.x) so
// that both versions build the same way.
#if __has_include(<catch2/catch_session.hpp>)
#include <catch2/catch_session.hpp>
#else
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#endif

int main(int argc, char* argv[]) { return Catch::Session().run(argc, argv); }
