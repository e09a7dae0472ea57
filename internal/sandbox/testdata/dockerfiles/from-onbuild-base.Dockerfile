FROM local-base:1
RUN true
