#include <gtest/gtest.h>

#include "gguf/ggml_type.h"

namespace channel {

TEST(GgmlType, BlockGeometryMatchesLlamaCpp) {
  EXPECT_EQ(ggml_type_traits(0)->block_bytes, 4);
  EXPECT_EQ(ggml_type_traits(8)->block_elems, 32);
  EXPECT_EQ(ggml_type_traits(8)->block_bytes, 34);
  EXPECT_EQ(ggml_type_traits(2)->block_bytes, 18);
  EXPECT_EQ(ggml_type_traits(30)->name, "bf16");
  EXPECT_EQ(ggml_type_traits(14)->block_bytes, 210);  // q6_K
  EXPECT_EQ(ggml_type_traits(14)->block_elems, 256);
  EXPECT_EQ(ggml_type_traits(6)->block_bytes, 22);  // q5_0
  EXPECT_EQ(ggml_type_name(14), "q6_K");
  EXPECT_FALSE(ggml_type_traits(15).has_value());  // q8_K: activations only
  EXPECT_FALSE(ggml_type_traits(23).has_value());  // iq4_xs
  EXPECT_EQ(ggml_type_name(1000), "type 1000");
}

}  // namespace channel
