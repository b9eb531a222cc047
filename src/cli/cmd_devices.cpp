// cmd_devices.cpp — `baton devices`: the devices ggml found (llama-server's --list-devices).
#include <CLI/CLI.hpp>

#include <cstdio>

#include "baton/device.h"
#include "cli.h"

namespace baton {

void cli_add_devices(CLI::App & app, cli_run_fn & run) {
    CLI::App * sub = app.add_subcommand("devices", "List the devices ggml found (what -dev/--device names)");
    sub->callback([&run] {
        run = [] {
            std::printf("Available devices:\n");
            for (const auto & d : devices_available())
                std::printf("  %s: %s [%s] (%zu MiB, %zu MiB free)\n", d.name.c_str(), d.description.c_str(),
                            d.kind.c_str(), d.memory_total >> 20, d.memory_free >> 20);
            return k_exit_ok;
        };
    });
}

}  // namespace baton
