// Files Loom writes appear whole or not at all (support/atomic_file.h): a replaced file holds the old
// bytes or the new, never a mix; nothing is left beside it; errors name the path and the fix.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "support/atomic_file.h"
#include "support/error.h"

namespace {

namespace fs = std::filesystem;

fs::path scratch() {
    fs::path d = fs::temp_directory_path() / ("loom_atomic_" + std::to_string(getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
}

std::string slurp(const fs::path &p) {
    std::ifstream f(p, std::ios::binary);
    std::ostringstream os;
    os << f.rdbuf();
    return os.str();
}

TEST(AtomicFile, ReplacesWholeAndLeavesNothingBeside) {
    fs::path d = scratch(), f = d / "a.json";
    loom::write_file_atomically(f.string(), "first");
    loom::write_file_atomically(f.string(), std::string(1 << 20, 'x'));
    EXPECT_EQ(slurp(f), std::string(1 << 20, 'x'));
    EXPECT_EQ(std::distance(fs::directory_iterator(d), fs::directory_iterator()), 1);
    fs::remove_all(d);
}

TEST(AtomicFile, RefusesToOverwriteWithoutForce) {
    fs::path d = scratch(), f = d / "s.sched";
    loom::write_file_atomically(f.string(), "kept");
    try {
        loom::write_file_atomically(f.string(), "new", /*overwrite=*/false);
        FAIL() << "expected a UserError";
    } catch (const loom::UserError &e) {
        std::string m = e.what();
        EXPECT_NE(m.find(f.string()), std::string::npos) << m;
        EXPECT_NE(m.find("--force"), std::string::npos) << m;
    }
    EXPECT_EQ(slurp(f), "kept");
    fs::remove_all(d);
}

TEST(AtomicFile, MissingFolderNamesThePath) {
    fs::path d = scratch(), f = d / "no" / "such" / "out.npy";
    try {
        loom::write_file_atomically(f.string(), "x");
        FAIL() << "expected a UserError";
    } catch (const loom::UserError &e) {
        std::string m = e.what();
        EXPECT_NE(m.find(f.string()), std::string::npos) << m;
        EXPECT_NE(m.find("folder exists"), std::string::npos) << m;
    }
    fs::remove_all(d);
}

TEST(AtomicFile, ConcurrentWritersEachLeaveAWholeFile) {
    fs::path d = scratch(), f = d / "race.txt";
    std::vector<std::thread> writers;
    for (int k = 0; k < 8; k++)
        writers.emplace_back([&, k] {
            for (int i = 0; i < 20; i++) loom::write_file_atomically(f.string(), std::string(100000, char('a' + k)));
        });
    for (auto &t : writers) t.join();
    std::string got = slurp(f);
    ASSERT_EQ(got.size(), 100000u);
    EXPECT_EQ(got, std::string(100000, got[0]));
    EXPECT_EQ(std::distance(fs::directory_iterator(d), fs::directory_iterator()), 1);
    fs::remove_all(d);
}

}  // namespace
