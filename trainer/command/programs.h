// What launch runs, found on this machine: the program COMMAND names, the
// script a Python interpreter's command line runs, an allocator's library,
// and granary's startup module for Python ranks.
#pragma once

#include <string>
#include <vector>

#include "base/environment.h"
#include "trainer/command/command.h"

namespace granary {

// The program COMMAND names, as execve needs it: a path, or found on PATH;
// "" if there is none to run.
std::string FindProgram(const std::string& name, const Environment& env);

// The script a Python interpreter's command line runs (`python3 -u train.py
// ...`: "train.py"), or "" where it runs none from a file (-c, -m, stdin, a
// REPL) or `command` starts no Python interpreter.
std::string PythonScriptOf(const std::vector<std::string>& command);

// The shared library of `allocator` ("" for glibc's own, or if not installed).
std::string AllocatorLibrary(Allocator allocator);

// The folder of granary's startup module (sitecustomize.py: it counts a
// Python rank's training steps on its heartbeat), beside this program;
// "" if it is not there.
// Looked up once: every probe and start asks.
const std::string& StartupModuleDir();

}  // namespace granary
