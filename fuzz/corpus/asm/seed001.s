.semaphores 32
