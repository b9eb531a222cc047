// thread_annotations.h — clang thread-safety analysis for Baton's shared state.
//
// Every piece of state shared between threads is declared next to the mutex that guards it
// (`T x BATON_GUARDED_BY(mu_);`), functions that need a lock held say so (`BATON_REQUIRES(mu_)`), and
// the build's clang pass (-Wthread-safety -Werror, scripts/check) proves every access holds the lock.
// GCC ignores the attributes. baton::mutex is std::mutex with the capability attribute; baton::lock_guard
// holds it for a scope; baton::condition_variable waits on a baton::mutex the analysis knows is held.
// Thread-safety: these are the tools; the types are as thread-safe as std::mutex / std::condition_variable.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define BATON_TSA(x) __attribute__((x))
#else
#define BATON_TSA(x)
#endif

#define BATON_CAPABILITY(name) BATON_TSA(capability(name))
#define BATON_SCOPED_CAPABILITY BATON_TSA(scoped_lockable)
#define BATON_GUARDED_BY(mu) BATON_TSA(guarded_by(mu))
#define BATON_PT_GUARDED_BY(mu) BATON_TSA(pt_guarded_by(mu))
#define BATON_REQUIRES(...) BATON_TSA(requires_capability(__VA_ARGS__))
#define BATON_EXCLUDES(...) BATON_TSA(locks_excluded(__VA_ARGS__))
#define BATON_ACQUIRE(...) BATON_TSA(acquire_capability(__VA_ARGS__))
#define BATON_RELEASE(...) BATON_TSA(release_capability(__VA_ARGS__))
#define BATON_NO_THREAD_SAFETY_ANALYSIS BATON_TSA(no_thread_safety_analysis)

namespace baton {

class BATON_CAPABILITY("mutex") mutex {
  public:
    void lock() BATON_ACQUIRE() { mu_.lock(); }
    void unlock() BATON_RELEASE() { mu_.unlock(); }

  private:
    std::mutex mu_;
};

class BATON_SCOPED_CAPABILITY lock_guard {
  public:
    explicit lock_guard(mutex & mu) BATON_ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
    ~lock_guard() BATON_RELEASE() { mu_.unlock(); }
    lock_guard(const lock_guard &) = delete;
    lock_guard & operator=(const lock_guard &) = delete;

  private:
    mutex & mu_;
};

// condition_variable waits with mu held (the analysis checks the caller holds it); like
// std::condition_variable, it releases mu while blocked and holds it again when it returns.
class condition_variable {
  public:
    template <typename Pred>
    void wait(mutex & mu, Pred pred) BATON_REQUIRES(mu) {
        cv_.wait(mu, pred);
    }
    template <typename Rep, typename Period, typename Pred>
    bool wait_for(mutex & mu, std::chrono::duration<Rep, Period> d, Pred pred) BATON_REQUIRES(mu) {
        return cv_.wait_for(mu, d, pred);
    }
    template <typename Clock, typename Dur, typename Pred>
    bool wait_until(mutex & mu, std::chrono::time_point<Clock, Dur> t, Pred pred) BATON_REQUIRES(mu) {
        return cv_.wait_until(mu, t, pred);
    }
    void notify_one() { cv_.notify_one(); }
    void notify_all() { cv_.notify_all(); }

  private:
    std::condition_variable_any cv_;
};

}  // namespace baton
