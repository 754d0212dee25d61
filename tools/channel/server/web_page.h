// The single page of the web view (served at /).
#pragma once

#include <string>

namespace channel::server {

const std::string& web_page_html();

}  // namespace channel::server
