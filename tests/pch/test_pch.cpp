// Compiles tests/pch/test_pch.h once, as the precompiled header every test executable
// reuses (tests/CMakeLists.txt); it has no code of its own.
