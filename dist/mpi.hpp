// MPI as the dist layer uses it: initialised once per process with MPI_THREAD_SERIALIZED (one
// thread at a time calls MPI; the stager's thread never does), finalised at exit when this layer
// initialised it, and every call's error returned (MPI_ERRORS_RETURN) and thrown with MPI's text.
#pragma once

#include <mpi.h>

#include <string>

namespace baregpu::dist::mpi {

// MPI_Init_thread unless the application did. Throws baregpu::Error when MPI cannot start, or
// runs with less than MPI_THREAD_SERIALIZED.
void ensure_initialized();

// A rank failed or vanished: at exit, MPI_Finalize is skipped. It waits for every rank, a dead
// one included (Open MPI 4.1 with --enable-recovery: forever, in one run of ten), and this job
// cannot end cleanly anyway; the launcher sees the exit without it and ends the job.
void note_broken() noexcept;

// MPI's text for an error code.
std::string error_text(int code);

// Throws baregpu::Error("<call>: <MPI's text>") unless code is MPI_SUCCESS.
void check(int code, const char* call);

// The host's name as MPI gives it (MPI_Get_processor_name).
std::string processor_name();

}  // namespace baregpu::dist::mpi
