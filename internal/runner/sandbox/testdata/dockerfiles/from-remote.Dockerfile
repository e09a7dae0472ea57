FROM 127.0.0.1:5000/evil:latest
