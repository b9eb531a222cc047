// test_node_main.cpp — `baton-test-node`: the `baton` CLI plus faults a prefill node can be told to make, for
// the end-to-end tests of the router and the decode side. Production builds never contain these flags: the
// hooks they set (cli_test_seam.h, node_test_seam.h) are private to their modules and only this test
// executable reaches them.
//
//   --test-corrupt-state   flip one byte in the middle of the state section of every blob the node sends
//                          (after it was written, so the section checksum no longer matches)
//   --test-truncate-blob   send the first half of every blob (with the full Content-Length), then drop the
//                          connection: a prefill node dying mid-transfer
//   --test-pause-held-state MS   serve a held state (GET /v1/states/{id}) in two halves, MS ms apart: a decode
//                          node fetching it is mid-fetch for that long
//   --test-cut-stream N    serve the k-th held stream (streamed transfer; k = 0, 1, ...) up to N + k frames,
//                          then drop the connection
//   --test-migrate-after N every generation the router can move (live migration) moves once it has generated N
//                          tokens on this node
//
// Every other argument goes to the CLI unchanged.
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "baton/blob.h"
#include "baton/cli/cli_main.h"
#include "cli_test_seam.h"
#include "node_test_seam.h"

namespace {

void corrupt_state(std::vector<uint8_t> & blob) {
    for (const auto & s : baton::blob_walk(blob).sections) {
        if (s.name != "state" || !s.complete || s.length == 0) continue;
        const uint64_t at = s.payload_offset + s.length / 2;
        if (at < blob.size()) blob[size_t(at)] ^= 0x5a;
        return;
    }
}

}  // namespace

int main(int argc, char ** argv) {
    bool corrupt = false, truncate = false;
    uint32_t pause_ms = 0;
    int cut_stream = -1;
    uint32_t migrate_after = 0;
    std::vector<char *> args;
    for (int i = 0; i < argc; ++i) {
        if (i > 0 && std::strcmp(argv[i], "--test-corrupt-state") == 0) corrupt = true;
        else if (i > 0 && std::strcmp(argv[i], "--test-truncate-blob") == 0) truncate = true;
        else if (i > 0 && i + 1 < argc && std::strcmp(argv[i], "--test-pause-held-state") == 0)
            pause_ms = uint32_t(std::strtoul(argv[++i], nullptr, 10));
        else if (i > 0 && i + 1 < argc && std::strcmp(argv[i], "--test-cut-stream") == 0)
            cut_stream = int(std::strtol(argv[++i], nullptr, 10));
        else if (i > 0 && i + 1 < argc && std::strcmp(argv[i], "--test-migrate-after") == 0)
            migrate_after = uint32_t(std::strtoul(argv[++i], nullptr, 10));
        else args.push_back(argv[i]);
    }
    if (corrupt || truncate || pause_ms > 0 || cut_stream >= 0 || migrate_after > 0) {
        auto seam = std::make_shared<baton::node_test_seam>();
        if (corrupt || truncate)
            seam->on_blob_out = [corrupt, truncate](std::vector<uint8_t> & blob) -> size_t {
                if (corrupt) corrupt_state(blob);
                return truncate ? blob.size() / 2 : blob.size();
            };
        seam->held_state_pause_ms = pause_ms;
        seam->stream_cut_after_frames = cut_stream;
        seam->migrate_after_tokens = migrate_after;
        baton::cli_test_on_node = [seam](baton::node & s) { baton::node_test_access::install(s, seam); };
    }
    args.push_back(nullptr);
    return baton::cli_main(int(args.size()) - 1, args.data());
}
