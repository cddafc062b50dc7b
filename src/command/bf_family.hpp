#pragma once
// The BF.* family's files, each with its registrations at its bottom:
//   bf_commands.cpp        creating filters, adds and lookups (BF.RESERVE,
//                          BF.ADD, BF.MADD, BF.INSERT, BF.EXISTS, BF.MEXISTS);
//                          its register_bf_commands (families.hpp) calls the
//                          two below
//   bf_options.cpp         how BF.RESERVE and BF.INSERT read their options
//   bf_window.cpp          ... and an expiring filter's (WINDOW, SLICES)
//   bf_info_commands.cpp   what a filter reports (BF.INFO, BF.DEBUG)
//   bf_age_info.cpp        ... and an expiring filter's BF.INFO
//   bf_set_commands.cpp    set operations (BF.MERGE, BF.CARD, BF.INTERCARD)
//   bf_chunk_commands.cpp  dumping and loading by chunks (BF.SCANDUMP,
//                          BF.LOADCHUNK)

namespace bloomery::command {
class Registry;
void register_bf_info_commands(Registry& registry);
void register_bf_chunk_commands(Registry& registry);
void register_bf_set_commands(Registry& registry);
}  // namespace bloomery::command
