#include "dist/mpi.hpp"

#include "base/error.hpp"

#include <atomic>
#include <cstdlib>
#include <mutex>

namespace baregpu::dist::mpi {

namespace {

std::atomic<bool> g_broken{false};

void finalize_at_exit() {
    if (g_broken.load()) return;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
}

const char* level_name(int level) {
    switch (level) {
        case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
        case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
        case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
        case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
    }
    return "an unknown thread level";
}

}  // namespace

void ensure_initialized() {
    static std::once_flag once;
    std::call_once(once, [] {
        int initialized = 0;
        check(MPI_Initialized(&initialized), "MPI_Initialized");
        int provided = MPI_THREAD_SINGLE;
        if (initialized) {
            check(MPI_Query_thread(&provided), "MPI_Query_thread");
        } else {
            check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
            // At exit, after the communicators' destructors have run (they are destroyed before
            // the static objects this registration comes after).
            std::atexit(finalize_at_exit);
        }
        if (provided < MPI_THREAD_SERIALIZED)
            throw Error("", std::string("MPI runs with ") + level_name(provided) +
                                ": baregpu::dist needs MPI_THREAD_SERIALIZED (collectives may be called from any one thread at a time)");
    });
}

void note_broken() noexcept { g_broken.store(true); }

std::string error_text(int code) {
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
    return std::string(text, static_cast<size_t>(length)) + " (MPI error " + std::to_string(code) + ")";
}

void check(int code, const char* call) {
    if (code != MPI_SUCCESS) throw Error("", std::string(call) + ": " + error_text(code));
}

std::string processor_name() {
    char name[MPI_MAX_PROCESSOR_NAME];
    int length = 0;
    if (MPI_Get_processor_name(name, &length) != MPI_SUCCESS) return "?";
    return std::string(name, static_cast<size_t>(length));
}

}  // namespace baregpu::dist::mpi
