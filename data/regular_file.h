// Whether a data file named by a folder listing can be read as a file. An image folder may hold
// a FIFO, a dangling symbolic link or a symbolic link loop under an image's name; opening a FIFO
// blocks until something writes to it, so readers ask this (stat, which never blocks) first and
// report the entry as a bad file instead of leaving it out or hanging.
#pragma once

#include <string>

namespace mgpu {

// "" for a regular file (or a symbolic link to one), else what `path` is instead, e.g. "a FIFO
// (named pipe), not a regular file" or "a dangling symbolic link to 'x.jpg'".
std::string WhyNotARegularFile(const std::string& path);

}  // namespace mgpu
