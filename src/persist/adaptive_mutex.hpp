#pragma once
// A mutex that spins a short while before it sleeps (glibc's adaptive
// kind). For a lock many threads take for a few instructions each, as the
// journal's handoff: a thread that finds it held usually gets it within the
// spin, without the futex sleep and wake-up (two system calls and a context
// switch) a plain std::mutex costs both threads. Waited on with
// std::condition_variable_any.

#include <pthread.h>

namespace bloomery::persist {

class AdaptiveMutex {
public:
    AdaptiveMutex() {
        pthread_mutexattr_t attributes;
        pthread_mutexattr_init(&attributes);
        pthread_mutexattr_settype(&attributes, PTHREAD_MUTEX_ADAPTIVE_NP);
        pthread_mutex_init(&mutex_, &attributes);
        pthread_mutexattr_destroy(&attributes);
    }
    ~AdaptiveMutex() { pthread_mutex_destroy(&mutex_); }
    AdaptiveMutex(const AdaptiveMutex&) = delete;
    AdaptiveMutex& operator=(const AdaptiveMutex&) = delete;

    void lock() { pthread_mutex_lock(&mutex_); }
    bool try_lock() { return pthread_mutex_trylock(&mutex_) == 0; }
    void unlock() { pthread_mutex_unlock(&mutex_); }

private:
    pthread_mutex_t mutex_;
};

}  // namespace bloomery::persist
