// clean_text: a DUT's text, made safe for the results file, JUnit XML, the report and the console.
#define BOOST_TEST_MODULE text
#include <boost/test/unit_test.hpp>

#include <string>

#include "swa/harness/base/text.hpp"

using swa::harness::clean_text;

BOOST_AUTO_TEST_CASE(plain_text_and_utf8_pass_unchanged) {
  const std::string t = "exec: 'dut' exited with status 3; stderr: line one\n\tline two \xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80";
  BOOST_TEST(clean_text(t) == t);
}

BOOST_AUTO_TEST_CASE(control_characters_are_shown_as_text) {
  BOOST_TEST(clean_text("\x1b[31mred\x1b[0m\r\x07") == "\\x1b[31mred\\x1b[0m\\x0d\\x07");
  BOOST_TEST(clean_text(std::string("a\0b", 3)) == "a\\x00b");
  BOOST_TEST(clean_text("\x7f") == "\\x7f");
  BOOST_TEST(clean_text("\xC2\x85") == "\\u0085");  // NEL, a C1 control
}

BOOST_AUTO_TEST_CASE(bytes_that_are_not_utf8_become_replacement_characters) {
  const std::string fffd = "\xEF\xBF\xBD";
  BOOST_TEST(clean_text("a\xFF" "b") == "a" + fffd + "b");
  BOOST_TEST(clean_text("\xC0\xAF") == fffd + fffd);          // overlong '/'
  BOOST_TEST(clean_text("\xED\xA0\x80") == fffd + fffd + fffd);  // a UTF-16 surrogate
  BOOST_TEST(clean_text("\xEF\xBF\xBE") == fffd + fffd + fffd);  // U+FFFE, not an XML character
  BOOST_TEST(clean_text("\xE2\x82") == fffd + fffd);          // cut short
  BOOST_TEST(clean_text("\xF4\x90\x80\x80") == fffd + fffd + fffd + fffd);  // past U+10FFFF
}

BOOST_AUTO_TEST_CASE(the_cap_cuts_on_a_character_boundary_and_says_how_much) {
  // "ab€" is 5 bytes; a cap of 4 must not keep half of the euro sign.
  BOOST_TEST(clean_text("ab\xE2\x82\xAC" "cd", 4) == "ab [... 5 more bytes]");
  BOOST_TEST(clean_text(std::string(10000, 'x')).size() == 4096u + std::string(" [... 5904 more bytes]").size());
  BOOST_TEST(clean_text("\x1b\x1b", 5) == "\\x1b [... 1 more bytes]");  // an escape is never split either
}

BOOST_AUTO_TEST_CASE(cleaning_twice_changes_nothing) {
  const std::string once = clean_text("\x1b]0;title\x07\xFF\xC3\xA9");
  BOOST_TEST(clean_text(once) == once);
}

BOOST_AUTO_TEST_CASE(shell_quoting_keeps_plain_words_and_quotes_the_rest) {
  using swa::harness::shell_quote;
  using swa::harness::shell_quote_always;
  BOOST_TEST(shell_quote("mode=prefill/seqs=4-2/w=8") == "mode=prefill/seqs=4-2/w=8");
  BOOST_TEST(shell_quote("exec:python3 dut.py") == "'exec:python3 dut.py'");
  BOOST_TEST(shell_quote("it's") == "'it'\\''s'");
  BOOST_TEST(shell_quote("") == "''");
  BOOST_TEST(shell_quote("a\nb;rm -rf x") == "'a\nb;rm -rf x'");
  BOOST_TEST(shell_quote_always("plain") == "'plain'");
}
