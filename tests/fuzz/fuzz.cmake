# libFuzzer targets (issue 8), configured instead of the rest of the project when KITE_FUZZ=ON:
#   cmake -S . -B build-fuzz -G Ninja -DKITE_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++
# Only the parsers under test are compiled (with ASan + UBSan + coverage); the server and
# engine are not, because clang 14 cannot compile Asio's C++20 coroutines against libstdc++ 12.
# scripts/fuzz.sh builds and runs every target on its corpus in tests/fuzz/corpus/<target>/.
if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "KITE_FUZZ=ON needs clang (libFuzzer): add -DCMAKE_CXX_COMPILER=clang++")
endif()

set(KITE_FUZZ_SANITIZERS -fsanitize=address,undefined -fno-sanitize-recover=undefined
                         -fno-omit-frame-pointer)
file(GLOB KITE_FUZZ_LIB_SOURCES CONFIGURE_DEPENDS
     ${CMAKE_SOURCE_DIR}/src/core/*.cpp
     ${CMAKE_SOURCE_DIR}/src/tokenizer/*.cpp
     ${CMAKE_SOURCE_DIR}/src/model/config.cpp
     ${CMAKE_SOURCE_DIR}/src/model/safetensors.cpp
     ${CMAKE_SOURCE_DIR}/src/sampling/sampling_params.cpp
     ${CMAKE_SOURCE_DIR}/src/server/openai_request.cpp
     ${CMAKE_SOURCE_DIR}/src/server/api_error.cpp)
add_library(kite_fuzz_lib STATIC ${KITE_FUZZ_LIB_SOURCES})
target_include_directories(kite_fuzz_lib PUBLIC ${CMAKE_SOURCE_DIR}/src)
target_compile_options(kite_fuzz_lib PUBLIC ${KITE_FUZZ_SANITIZERS} -g -O1)
target_compile_options(kite_fuzz_lib PRIVATE -fsanitize=fuzzer-no-link)
target_link_libraries(kite_fuzz_lib PUBLIC nlohmann_json::nlohmann_json spdlog::spdlog fmt::fmt
                      PkgConfig::PCRE2 PkgConfig::XXHASH Threads::Threads)

file(GLOB KITE_FUZZ_TARGET_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_*.cpp)
set(KITE_FUZZ_TARGETS "")
foreach(source ${KITE_FUZZ_TARGET_SOURCES})
  get_filename_component(name ${source} NAME_WE)
  add_executable(${name} ${source})
  target_compile_options(${name} PRIVATE -fsanitize=fuzzer)
  target_link_options(${name} PRIVATE -fsanitize=fuzzer ${KITE_FUZZ_SANITIZERS})
  target_link_libraries(${name} PRIVATE kite_fuzz_lib)
  target_compile_definitions(${name} PRIVATE KITE_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
  list(APPEND KITE_FUZZ_TARGETS ${name})
endforeach()
add_custom_target(fuzz_targets DEPENDS ${KITE_FUZZ_TARGETS})
