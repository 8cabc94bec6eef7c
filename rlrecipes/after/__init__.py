"""After training: the merged model, its evaluation, the run judged by its contract."""
