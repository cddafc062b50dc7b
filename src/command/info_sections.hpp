#pragma once
// INFO's sections, each in its group's file: the process and its clients
// (info_server_sections.cpp), memory and persistence
// (info_data_sections.cpp), the counters (info_stats_sections.cpp). Each
// appends its "# Name" line and its "field:value\r\n" lines to `out`, Redis
// 7.0's fields in Redis's order; info_commands.cpp lists the sections and
// answers INFO.

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "bloomery/command/context.hpp"

namespace bloomery::command::info {

// INFO reports on every part of the server but shutdown and MIGRATE.
using InfoContext = With<uses::Clients, uses::Stats, uses::Persistence, uses::Replication,
                         uses::Gate, uses::PubSub>;

// One "field:value" line.
void line(std::string& out, std::string_view field, std::string_view value);
template <class Number>
requires std::is_arithmetic_v<Number>
void line(std::string& out, std::string_view field, Number value) {
    line(out, field, std::string_view(std::to_string(value)));
}
// A line whose value is text the server was given (an error from the disk,
// from a primary): whole, with control bytes shown as core/printable.hpp
// shows them, so it cannot break INFO's lines.
void text_line(std::string& out, std::string_view field, std::string_view text);

// Redis's forms of numbers: 1.50M, 12.34%, 0.25.
std::string human_bytes(std::uint64_t bytes);
std::string percent(std::uint64_t numerator, std::uint64_t denominator);
std::string fixed2(double value);
std::string ratio(std::uint64_t numerator, std::uint64_t denominator);

void server_section(InfoContext& ctx, std::string& out);
void clients_section(InfoContext& ctx, std::string& out);
void cpu_section(InfoContext& ctx, std::string& out);
void modules_section(InfoContext& ctx, std::string& out);
void cluster_section(InfoContext& ctx, std::string& out);
void keyspace_section(InfoContext& ctx, std::string& out);

void memory_section(InfoContext& ctx, std::string& out);
void persistence_section(InfoContext& ctx, std::string& out);

void stats_section(InfoContext& ctx, std::string& out);
void replication_section(InfoContext& ctx, std::string& out);
void errorstats_section(InfoContext& ctx, std::string& out);
void commandstats_section(InfoContext& ctx, std::string& out);
void latencystats_section(InfoContext& ctx, std::string& out);

}  // namespace bloomery::command::info
