// Keyword arrays: walk them in libpq's order (keyword_arrays.hpp), copying
// every entry but with_rsocket into arrays we own.
#include "libclient/conninfo/keyword_arrays.hpp"

#include <cstring>

#include "libclient/conninfo/connection_string.hpp"

namespace pg_rdma::conninfo {

void KeywordArrays::append(std::string keyword, std::optional<std::string> value) {
    keywords_.push_back(std::move(keyword));
    values_.push_back(std::move(value));
    rebuild_pointers();
}

void KeywordArrays::rebuild_pointers() {
    keyword_pointers_.clear();
    value_pointers_.clear();
    for (std::size_t i = 0; i < keywords_.size(); ++i) {
        keyword_pointers_.push_back(keywords_[i].c_str());
        value_pointers_.push_back(values_[i] ? values_[i]->c_str() : nullptr);
    }
    keyword_pointers_.push_back(nullptr);
    value_pointers_.push_back(nullptr);
}

ArraysExtraction extract_from_keyword_arrays(const char* const* keywords, const char* const* values,
                                             bool expand_dbname) {
    ArraysExtraction result;
    if (keywords == nullptr)
        return result;

    // The entry libpq would expand, and what it holds.
    std::size_t expanded = static_cast<std::size_t>(-1);
    Extraction dbname;
    if (expand_dbname) {
        for (std::size_t i = 0; keywords[i] != nullptr; ++i) {
            if (std::strcmp(keywords[i], "dbname") == 0 && values[i] != nullptr) {
                if (is_recognized_connection_string(values[i])) {
                    expanded = i;
                    dbname = extract_from_connection_string(values[i]);
                }
                break;
            }
        }
    }

    if (dbname.status == ExtractStatus::SyntaxError) {
        result.status = ExtractStatus::SyntaxError;
        for (std::size_t i = 0; keywords[i] != nullptr; ++i)
            result.arrays.append(keywords[i],
                                 values[i] ? std::optional<std::string>(values[i]) : std::nullopt);
        return result;
    }

    for (std::size_t i = 0; keywords[i] != nullptr; ++i) {
        const char* value = values[i];
        if (kKeyword == keywords[i]) {
            if (value != nullptr && value[0] != '\0')
                result.value = value;
            ++result.occurrences;
            continue;  // dropped; NULL or "" ones were ignored by libpq anyway
        }
        if (i == expanded) {
            if (dbname.value)
                result.value = dbname.value;
            result.occurrences += dbname.occurrences;
            result.arrays.append(keywords[i], dbname.rewritten);
            continue;
        }
        result.arrays.append(keywords[i], value ? std::optional<std::string>(value) : std::nullopt);
    }
    return result;
}

}  // namespace pg_rdma::conninfo
