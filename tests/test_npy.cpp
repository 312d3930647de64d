// NumPy .npy reading and writing: round trips of every dtype, files written by NumPy itself,
// and one test per kind of bad file checking the message names the file and the problem.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "graph/npy.h"
#include "support/error.h"
#include "test_util.h"

namespace loom {
namespace {

namespace fs = std::filesystem;
using loom::testing::user_error_of;

std::string temp_dir() {
    fs::path d = fs::temp_directory_path() / ("loom_test_npy_" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d.string();
}

void write_bytes(const std::string &path, const std::string &bytes) {
    std::ofstream(path, std::ios::binary).write(bytes.data(), (std::streamsize)bytes.size());
}


// An .npy file (version 1.0) with the given header dict and data bytes.
std::string npy_with_header(const std::string &dict, const std::string &data, int version = 1) {
    std::string h = dict + "\n";
    std::string out = "\x93NUMPY";
    out += (char)version;
    out += '\0';
    if (version == 1) {
        out += (char)(h.size() & 0xff);
        out += (char)(h.size() >> 8);
    } else {
        for (int i = 0; i < 4; i++) out += (char)((h.size() >> (8 * i)) & 0xff);
    }
    return out + h + data;
}

class NpyRoundTrip : public ::testing::TestWithParam<DType> {};

TEST_P(NpyRoundTrip, WriteThenReadGivesSameTensor) {
    DType t = GetParam();
    for (Shape shape : {Shape{}, Shape{7}, Shape{2, 3}, Shape{2, 3, 4, 5}, Shape{0, 3}}) {
        Tensor a(t, shape);
        fill_random(a, 42, -50, 50);
        std::string path = temp_dir() + "/rt_" + dtype_name(t) + "_" + shape_str(shape) + ".npy";
        write_npy(path, a);
        Tensor b = read_npy(path);
        EXPECT_EQ(b.dtype(), t);
        EXPECT_EQ(b.shape(), shape);
        EXPECT_EQ(b.bytes(), a.bytes()) << dtype_name(t) << " " << shape_str(shape);
        EXPECT_FALSE(fs::exists(path + ".tmp" + std::to_string(::getpid())));
        // NumPy aligns the data to 64 bytes; so do we.
        EXPECT_EQ((fs::file_size(path) - a.bytes().size()) % 64, 0u);
    }
}

INSTANTIATE_TEST_SUITE_P(AllDTypes, NpyRoundTrip,
                         ::testing::Values(DType::F32, DType::F16, DType::F64, DType::I64,
                                           DType::I32, DType::I16, DType::I8, DType::U8,
                                           DType::Bool),
                         [](const auto &info) { return std::string(dtype_name(info.param)); });

TEST(Npy, HeaderMatchesNumpy) {
    // Exactly what numpy.save(np.arange(6, dtype='<f4').reshape(2, 3)) writes, bytes and all.
    Tensor t = Tensor::from_doubles(DType::F32, {2, 3}, {0, 1, 2, 3, 4, 5});
    std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    std::string expect = "\x93NUMPY\x01";
    expect += '\0';
    expect += "v";  // header length 118
    expect += '\0';
    expect += dict + std::string(118 - dict.size() - 1, ' ') + "\n";
    std::string s = serialize_npy(t);
    EXPECT_EQ(s.substr(0, 128), expect);
    Tensor u = Tensor::from_doubles(DType::I64, {5}, {1, 2, 3, 4, 5});
    EXPECT_NE(serialize_npy(u).find("'shape': (5,), }"), std::string::npos);
}

TEST(Npy, ReadsVersion2AndDoubleQuotedHeaders) {
    std::string data(12, '\0');
    int32_t v[3] = {1, -2, 3};
    std::memcpy(data.data(), v, 12);
    Tensor t = parse_npy(npy_with_header("{\"descr\": \"<i4\", \"shape\": (3,), \"fortran_order\": False}", data, 2), "v2.npy");
    EXPECT_EQ(t.dtype(), DType::I32);
    EXPECT_EQ(t.to_ints(), (std::vector<int64_t>{1, -2, 3}));
}

TEST(Npy, ReadsFixtureWrittenByNumpy) {
    Tensor x = read_npy(testing::data_path("mlp/x.npy"));
    EXPECT_EQ(x.dtype(), DType::F32);
    EXPECT_EQ(x.shape(), (Shape{4, 64}));
}

TEST(NpyErrors, MissingFileNamesPath) {
    std::string msg = user_error_of([] { read_npy("/nonexistent/dir/weights.npy"); });
    EXPECT_NE(msg.find("/nonexistent/dir/weights.npy"), std::string::npos) << msg;
    EXPECT_NE(msg.find("cannot open"), std::string::npos) << msg;
}

TEST(NpyErrors, NotAnNpyFile) {
    std::string path = temp_dir() + "/garbage.npy";
    write_bytes(path, "PK\x03\x04 this is a zip, not an npy");
    std::string msg = user_error_of([&] { read_npy(path); });
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find("magic"), std::string::npos) << msg;
    EXPECT_NE(msg.find("numpy.save"), std::string::npos) << msg;
}

TEST(NpyErrors, TruncatedData) {
    Tensor t(DType::F32, {10, 10});
    std::string bytes = serialize_npy(t);
    std::string path = temp_dir() + "/truncated.npy";
    write_bytes(path, bytes.substr(0, bytes.size() - 7));
    std::string msg = user_error_of([&] { read_npy(path); });
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
    EXPECT_NE(msg.find("needs 400 data bytes, found 393"), std::string::npos) << msg;
}

TEST(NpyErrors, TruncatedHeader) {
    std::string bytes = serialize_npy(Tensor(DType::F32, {3}));
    for (size_t cut : {3, 8, 9, 40}) {
        std::string msg = user_error_of([&] { parse_npy(bytes.substr(0, cut), "cut.npy"); });
        EXPECT_NE(msg.find("cut.npy"), std::string::npos) << msg;
    }
    EXPECT_NE(user_error_of([&] { parse_npy(bytes.substr(0, 40), "cut.npy"); }).find("truncated"),
              std::string::npos);
}

TEST(NpyErrors, TrailingBytes) {
    std::string bytes = serialize_npy(Tensor(DType::I8, {3})) + "xx";
    std::string msg = user_error_of([&] { parse_npy(bytes, "long.npy"); });
    EXPECT_NE(msg.find("2 trailing bytes"), std::string::npos) << msg;
}

TEST(NpyErrors, FortranOrderIsRejected) {
    std::string f = npy_with_header("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", std::string(16, '\0'));
    std::string msg = user_error_of([&] { parse_npy(f, "f.npy"); });
    EXPECT_NE(msg.find("f.npy"), std::string::npos) << msg;
    EXPECT_NE(msg.find("Fortran order"), std::string::npos) << msg;
    EXPECT_NE(msg.find("ascontiguousarray"), std::string::npos) << msg;
}

TEST(NpyErrors, BigEndianIsRejected) {
    std::string f = npy_with_header("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", std::string(4, '\0'));
    std::string msg = user_error_of([&] { parse_npy(f, "be.npy"); });
    EXPECT_NE(msg.find("'>f4'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("big-endian"), std::string::npos) << msg;
}

TEST(NpyErrors, UnsupportedDTypeListsValidOnes) {
    std::string f = npy_with_header("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", std::string(8, '\0'));
    std::string msg = user_error_of([&] { parse_npy(f, "c.npy"); });
    EXPECT_NE(msg.find("'<c8'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("f4 f2 f8 i8 i4 i2 i1 u1 b1"), std::string::npos) << msg;
    std::string s = npy_with_header("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", std::string(4, '\0'));
    EXPECT_NE(user_error_of([&] { parse_npy(s, "rec.npy"); }).find("structured"), std::string::npos);
}

TEST(NpyErrors, MalformedHeader) {
    std::string f = npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }", "");
    std::string msg = user_error_of([&] { parse_npy(f, "bad.npy"); });
    EXPECT_NE(msg.find("bad.npy"), std::string::npos) << msg;
    EXPECT_NE(msg.find("malformed .npy header"), std::string::npos) << msg;
    std::string g = npy_with_header("{'descr': '<f4', 'shape': (2,), }", std::string(8, '\0'));
    EXPECT_NE(user_error_of([&] { parse_npy(g, "g.npy"); }).find("fortran_order"), std::string::npos);
}

TEST(NpyErrors, UnwritablePathNamesIt) {
    std::string msg = user_error_of([] { write_npy("/nonexistent/dir/out.npy", Tensor(DType::F32, {1})); });
    EXPECT_NE(msg.find("/nonexistent/dir/out.npy"), std::string::npos) << msg;
    EXPECT_NE(msg.find("cannot write"), std::string::npos) << msg;
}

}  // namespace
}  // namespace loom
