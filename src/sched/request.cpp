#include "sched/request.h"

namespace kite::sched {

bool is_finished(RequestStatus status) {
  switch (status) {
    case RequestStatus::kWaiting:
    case RequestStatus::kRunning:
    case RequestStatus::kPreempted:
      return false;
    case RequestStatus::kFinishedStopped:
    case RequestStatus::kFinishedLength:
    case RequestStatus::kFinishedAborted:
    case RequestStatus::kFinishedError:
      return true;
  }
  return false;
}

std::string_view to_string(RequestStatus status) {
  switch (status) {
    case RequestStatus::kWaiting:
      return "waiting";
    case RequestStatus::kRunning:
      return "running";
    case RequestStatus::kPreempted:
      return "preempted";
    case RequestStatus::kFinishedStopped:
      return "finished_stopped";
    case RequestStatus::kFinishedLength:
      return "finished_length";
    case RequestStatus::kFinishedAborted:
      return "finished_aborted";
    case RequestStatus::kFinishedError:
      return "finished_error";
  }
  return "unknown";
}

}  // namespace kite::sched
